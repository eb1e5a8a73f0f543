# PHA's learned mix weights (softplus-normalised, per block) vs block index: the
# "sandwich" pattern is GSS dominating the first and last blocks, attention the middle.
#   gnuplot -e "in='mix.tsv'; out='mix_sandwich.png'" [-e "subtitle='...'"] plots/mix_sandwich.gp
# in: tab-separated, a header line "block<TAB>gss<TAB>attn<TAB>ffn[<TAB>...]", then one row
#     per block: block index (0 = first), then the weight of each branch (they sum to 1).
if (!exists("in") || !exists("out")) { exit error "usage: gnuplot -e \"in='mix.tsv'; out='mix_sandwich.png'\" plots/mix_sandwich.gp" }
if (!exists("subtitle")) { subtitle = "" }
set terminal pngcairo size 1000,650 font "DejaVu Sans,13" enhanced
set output out
set datafile separator tab
set title "PHA mix weight per branch and block".(strlen(subtitle) ? "\n{/*0.75 ".subtitle."}" : "")
set xlabel "block index (0 = nearest the embedding)"
set ylabel "mix weight (softplus-normalised, sums to 1)"
stats in using 1 nooutput
set xrange [STATS_min - 0.25 : STATS_max + 0.25]
set xtics 1
set offsets 0, 0, graph 0.08, graph 0.08
set grid xtics ytics lc rgb "#dddddd"
set key outside right top box noenhanced autotitle columnheader
plot for [c=2:*] in using 1:c with linespoints lw 2.5 pt 7 ps 1.3, \
     1.0/3 with lines dt 3 lc rgb "gray50" title "equal (1/3)"
