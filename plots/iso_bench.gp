# PHA over the attention-only transformer of equal perplexity (interpolated between the two
# trained sizes that bracket it), per context length, with the spread of repeated timings:
# training tokens/s, training peak memory, inference memory (weights + decoder state),
# prefill and decode tokens/s (1 = equal).
#   gnuplot -e "in='iso.tsv'; out='iso.png'; n=5" [-e "subtitle='...'"] plots/iso_bench.gp
# in: n blocks separated by two blank lines, each a header "T<TAB>SERIES" then rows
# "T<TAB>median ratio<TAB>lowest<TAB>highest" (over the repeats).
if (!exists("in") || !exists("out") || !exists("n")) { exit error "usage: gnuplot -e \"in='iso.tsv'; out='iso.png'; n=5\" plots/iso_bench.gp" }
if (!exists("subtitle")) { subtitle = "" }
set terminal pngcairo size 1100,650 font "DejaVu Sans,13" enhanced
set output out
set datafile separator tab
set title "PHA / transformer of equal perplexity".(strlen(subtitle) ? "\n{/*0.75 ".subtitle."}" : "")
set xlabel "context length T (log scale)"
set ylabel "ratio PHA / transformer (log scale)"
set logscale xy 2
set grid lc rgb "#dddddd"
set key outside right top box noenhanced
set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lc rgb "gray40"
plot for [i=0:n-1] in index i using 1:2:3:4 with yerrorlines lw 2 pt 7 title columnheader(2)
