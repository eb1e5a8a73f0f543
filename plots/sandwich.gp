# PHA's mix weights as a heatmap: blocks (rows, 0 = nearest the embedding) x branches
# (columns: GSS, attention, FFN[, FFN aux]); the mean over seeds, values printed.
#   gnuplot -e "in='w.tsv'; out='sandwich.png'; nb=3; nblocks=4" [-e "subtitle='...'"] plots/sandwich.gp
# in: one row per block, nb tab-separated weights (each row sums to 1).
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
plot in matrix with image notitle, \
     in matrix using 1:2:(sprintf("%.2f", $3)) with labels font ",12" notitle
