# Test perplexity of PHA and its ablations: mean over seeds as a bar, ± one standard
# deviation as an error bar.
#   gnuplot -e "in='ablation.tsv'; out='ablation.png'" [-e "subtitle='...'"] plots/ablation.gp
# in: tab-separated, a header line, then rows "index<TAB>mean<TAB>sd<TAB>model".
if (!exists("in") || !exists("out")) { exit error "usage: gnuplot -e \"in='ablation.tsv'; out='ablation.png'\" plots/ablation.gp" }
if (!exists("subtitle")) { subtitle = "" }
set terminal pngcairo size 1000,650 font "DejaVu Sans,13" enhanced
set output out
set datafile separator tab
set title "PHA ablations: test perplexity".(strlen(subtitle) ? "\n{/*0.75 ".subtitle."}" : "")
set ylabel "test perplexity"
set style fill solid 0.6 border -1
set boxwidth 0.6
set grid ytics lc rgb "#dddddd"
set key off
set yrange [0:*]
set xtics noenhanced
plot in skip 1 using 1:2:xtic(4) with boxes lc rgb "#4477aa", \
     in skip 1 using 1:2:3 with yerrorbars lc rgb "black" pt 0 lw 2
