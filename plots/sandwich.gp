# PHA's mix weights as a heatmap: blocks (rows, 0 = nearest the embedding) x branches
# (columns: GSS, attention, FFN[, FFN aux]); the colour is the mean over seeds, each cell
# printed as mean and ± standard deviation over seeds (± 0.00 with one seed).
#   gnuplot -e "in='w.tsv'; out='sandwich.png'; nb=3; nblocks=4" [-e "subtitle='...'"] plots/sandwich.gp
# in: one line per cell: branch<TAB>block<TAB>mean<TAB>sd (each block's means sum to 1).
if (!exists("in") || !exists("out") || !exists("nb") || !exists("nblocks")) { exit error "usage: gnuplot -e \"in='w.tsv'; out='s.png'; nb=3; nblocks=4\" plots/sandwich.gp" }
if (!exists("subtitle")) { subtitle = "" }
set terminal pngcairo size 800,650 font "DejaVu Sans,13" enhanced
set output out
set datafile separator tab
set title "PHA mix weights per block".(strlen(subtitle) ? "\n{/*0.75 ".subtitle."}" : "")
set xrange [-0.5:nb - 0.5]
set yrange [-0.5:nblocks - 0.5]
set xtics ("GSS" 0, "attention" 1, "FFN" 2, "FFN aux" 3)
set ytics 1
set ylabel "block (0 = nearest the embedding)"
set cbrange [0:1]
set cblabel "weight"
set palette defined (0 "#ffffff", 0.33 "#9ecae1", 1 "#08306b")
plot in using 1:2:3 with image notitle, \
     in using 1:2:(sprintf("%.2f ± %.2f", $3, $4)) with labels font ",11" notitle
