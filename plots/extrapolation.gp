# Test loss by position inside windows of 4T tokens, one line per family (and SWAX
# with state carried across windows); a vertical line at the training length T.
#   gnuplot -e "in='extrap.tsv'; out='extrapolation.png'; T=256" [-e "subtitle='...'"] plots/extrapolation.gp
# in: tab-separated blocks (two blank lines between), one per line; each starts with a
#     header "position<TAB><name>", then rows "midpoint<TAB>loss<TAB>lo<TAB>hi" for the
#     bucket [lo, hi) of positions (tokens) inside a window; loss in nats per token.
if (!exists("in") || !exists("out") || !exists("T")) { exit error "usage: gnuplot -e \"in='extrap.tsv'; out='extrapolation.png'; T=256\" plots/extrapolation.gp" }
if (!exists("subtitle")) { subtitle = "" }
set terminal pngcairo size 1000,650 font "DejaVu Sans,13" enhanced
set output out
set datafile separator tab
set title "Loss by position beyond the training length".(strlen(subtitle) ? "\n{/*0.75 ".subtitle."}" : "")
set xlabel "position in the window (tokens, bucket midpoint; log scale)"
set ylabel "test loss (nats/token)"
set logscale x 2
set format x "%g"
set grid xtics ytics lc rgb "#dddddd"
set key outside right top box noenhanced
set arrow 1 from T, graph 0 to T, graph 1 nohead dt 2 lw 1.5 lc rgb "gray30"
set label 1 sprintf("T = %g (training length)", T) at T, graph 0.04 offset 0.6,0 textcolor rgb "gray30"
plot for [i=0:*] in index i using 1:2 with linespoints lw 2 pt 7 ps 0.8 title columnheader(2)
