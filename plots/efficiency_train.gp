# Training tokens/s (left) and peak memory (right) vs T for every family, log-log.
#   gnuplot -e "in='e.tsv'; out='e.png'" [-e "subtitle='...'"] plots/efficiency_train.gp
# in: blocks separated by two blank lines: header "T<TAB>family<TAB>peak_mb", rows "T<TAB>tok/s<TAB>MB".
if (!exists("in") || !exists("out")) { exit error "usage: gnuplot -e \"in='e.tsv'; out='e.png'\" plots/efficiency_train.gp" }
if (!exists("subtitle")) { subtitle = "" }
set terminal pngcairo size 1400,600 font "DejaVu Sans,12" enhanced
set output out
set datafile separator tab
set multiplot layout 1,2 title "Training cost vs sequence length".(strlen(subtitle) ? "\n{/*0.8 ".subtitle."}" : "")
set logscale xy 2
set grid lc rgb "#dddddd"
set key top right box noenhanced
set xlabel "T (tokens)"
set ylabel "training tokens/s"
plot for [i=0:*] in index i using 1:2 with linespoints lw 2 pt 7 title columnheader(2)
set ylabel "peak resident memory (MB)"
plot for [i=0:*] in index i using 1:3 with linespoints lw 2 pt 7 title columnheader(2)
unset multiplot
