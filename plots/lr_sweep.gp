# Learning-rate sweep: final validation perplexity against the peak rate (log scale), one
# line per model; the chosen rate of each is its lowest point.
#   gnuplot -e "in='lr_sweep.tsv'; out='lr_sweep.png'; n=3" [-e "subtitle='...'"] plots/lr_sweep.gp
# in: tab-separated, one block per model (blocks separated by two blank lines), each a header
# line "lr<TAB>MODEL" then rows "lr<TAB>val_ppl"; n: the number of blocks.
if (!exists("in") || !exists("out") || !exists("n")) { exit error "usage: gnuplot -e \"in='lr_sweep.tsv'; out='lr_sweep.png'; n=3\" plots/lr_sweep.gp" }
if (!exists("subtitle")) { subtitle = "" }
set terminal pngcairo size 1000,650 font "DejaVu Sans,13" enhanced
set output out
set datafile separator tab
set title "Learning-rate sweep (seed 1): final validation perplexity".(strlen(subtitle) ? "\n{/*0.75 ".subtitle."}" : "")
set xlabel "peak learning rate (AdamW, cosine to a tenth)"
set ylabel "validation perplexity"
set logscale x
set grid lc rgb "#dddddd"
set key top right noenhanced
plot for [i=0:n-1] in index i using 1:2 with linespoints lw 2 pt 7 title columnheader(2)
