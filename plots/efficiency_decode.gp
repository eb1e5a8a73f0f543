# Per-token decode tokens/s and prefill tokens/s (left) and the decoder's state/KV bytes
# (right) vs context length for every family, log-log.
#   gnuplot -e "in='d.tsv'; out='d.png'" [-e "subtitle='...'"] plots/efficiency_decode.gp
# in: blocks separated by two blank lines: header "context<TAB>family<TAB>prefill<TAB>state",
#     rows "context<TAB>decode tok/s<TAB>prefill tok/s<TAB>state bytes".
if (!exists("in") || !exists("out")) { exit error "usage: gnuplot -e \"in='d.tsv'; out='d.png'\" plots/efficiency_decode.gp" }
if (!exists("subtitle")) { subtitle = "" }
set terminal pngcairo size 1400,600 font "DejaVu Sans,12" enhanced
set output out
set datafile separator tab
set multiplot layout 1,2 title "Inference cost vs context length".(strlen(subtitle) ? "\n{/*0.8 ".subtitle."}" : "")
set logscale xy 2
set grid lc rgb "#dddddd"
set key top right box noenhanced font ",10"
set xlabel "context (tokens)"
set ylabel "tokens/s (solid: decode step, dashed: prefill)"
plot for [i=0:*] in index i using 1:2 with linespoints lw 2 pt 7 lc (i + 1) title columnheader(2), \
     for [i=0:*] in index i using 1:3 with lines lw 1.5 dt 2 lc (i + 1) notitle
set ylabel "decoder state / KV cache (bytes)"
plot for [i=0:*] in index i using 1:4 with linespoints lw 2 pt 7 lc (i + 1) title columnheader(2)
unset multiplot
