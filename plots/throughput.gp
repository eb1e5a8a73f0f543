# Training throughput (forward + backward + AdamW, batch 1) vs sequence length, one
# line per family (bench_model; dashed: PyTorch "tuned" when present). Log x.
#   gnuplot -e "in='bench.tsv'; out='throughput.png'" [-e "subtitle='...'"] plots/throughput.gp
# in: tab-separated blocks (two blank lines between), one per family/implementation;
#     each starts with a header "T<TAB><name><TAB>peak_mb", then rows
#     "T<TAB>tokens_per_s<TAB>peak_mb" (T in tokens, peak resident memory in MB).
if (!exists("in") || !exists("out")) { exit error "usage: gnuplot -e \"in='bench.tsv'; out='throughput.png'\" plots/throughput.gp" }
if (!exists("subtitle")) { subtitle = "" }
set terminal pngcairo size 1000,650 font "DejaVu Sans,13" enhanced
set output out
set datafile separator tab
set title "Training throughput vs sequence length".(strlen(subtitle) ? "\n{/*0.75 ".subtitle."}" : "")
set xlabel "sequence length T (tokens, log scale)"
set ylabel "training throughput (tokens/s, log scale)"
set logscale x 2
set logscale y
set format x "%g"
set format y "%g"
set grid xtics ytics mytics lc rgb "#dddddd"
set key outside right top box noenhanced
plot for [i=0:*] in index i using 1:2 with linespoints lw 2 pt 7 ps 1 title columnheader(2)
