# Peak resident memory of a training step vs sequence length, one line per family
# (bench_model; PyTorch "tuned" when present). Log x.
#   gnuplot -e "in='bench.tsv'; out='memory.png'" [-e "subtitle='...'"] plots/memory.gp
# in: the same file as throughput.gp: blocks with a header "T<TAB><name><TAB>peak_mb",
#     then rows "T<TAB>tokens_per_s<TAB>peak_mb" (peak resident memory in MB).
if (!exists("in") || !exists("out")) { exit error "usage: gnuplot -e \"in='bench.tsv'; out='memory.png'\" plots/memory.gp" }
if (!exists("subtitle")) { subtitle = "" }
set terminal pngcairo size 1000,650 font "DejaVu Sans,13" enhanced
set output out
set datafile separator tab
set title "Peak memory of a training step vs sequence length".(strlen(subtitle) ? "\n{/*0.75 ".subtitle."}" : "")
set xlabel "sequence length T (tokens, log scale)"
set ylabel "peak resident memory (MB, log scale)"
set logscale x 2
set logscale y
set format x "%g"
set format y "%g"
set grid xtics ytics mytics lc rgb "#dddddd"
set key outside right top box noenhanced
plot for [i=0:*] in index i using 1:3 with linespoints lw 2 pt 7 ps 1 title columnheader(2)
