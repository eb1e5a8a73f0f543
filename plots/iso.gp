# PHA over the attention-only transformer of the same perplexity, per context length:
# training tokens/s, peak memory, prefill and decode tokens/s, state/KV memory (1 = equal).
#   gnuplot -e "in='iso.tsv'; out='iso.png'" [-e "subtitle='...'"] plots/iso.gp
# in: header "T train_tok_s peak_mem prefill_tok_s decode_tok_s state_bytes", then ratio rows.
if (!exists("in") || !exists("out")) { exit error "usage: gnuplot -e \"in='iso.tsv'; out='iso.png'\" plots/iso.gp" }
if (!exists("subtitle")) { subtitle = "" }
set terminal pngcairo size 1000,650 font "DejaVu Sans,13" enhanced
set output out
set datafile separator tab
set title "PHA / transformer of (nearest) equal perplexity".(strlen(subtitle) ? "\n{/*0.75 ".subtitle."}" : "")
set xlabel "context length T (log scale)"
set ylabel "ratio PHA / transformer (log scale)"
set logscale xy 2
set grid lc rgb "#dddddd"
set key outside right top box noenhanced
set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lc rgb "gray40"
plot for [c=2:6] in using 1:c with linespoints lw 2 pt 7 title columnheader(c)
