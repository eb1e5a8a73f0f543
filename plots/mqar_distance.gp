# Multi-query recall accuracy vs key-to-query distance, one line per model: mean over seeds
# with ± one standard deviation (log2 x, distance bins [2^k, 2^k+1) at their geometric middle);
# the elimination floor (what a model without key→value binding scores, per bin) dashed,
# chance (1/16) dotted; vertical lines at the short and long windows and the training length T.
#   gnuplot -e "in='m.tsv'; out='m.png'; T=1024; ws=8; wl=128; chance=0.0625" [-e "subtitle='...'"] plots/mqar_distance.gp
# in: blocks separated by two blank lines: header "distance<TAB>model<TAB>sd", rows
# "distance<TAB>mean<TAB>sd"; the last block is the floor (its model column says so).
if (!exists("in") || !exists("out") || !exists("T")) { exit error "usage: gnuplot -e \"in='m.tsv'; out='m.png'; T=1024; ws=8; wl=128\" plots/mqar_distance.gp" }
if (!exists("subtitle")) { subtitle = "" }
if (!exists("chance")) { chance = 0.0625 }
if (!exists("nblocks")) { nblocks = 1 }
set terminal pngcairo size 1100,680 font "DejaVu Sans,13" enhanced
set output out
set datafile separator tab
set title "Multi-query recall: accuracy vs key-to-query distance".(strlen(subtitle) ? "\n{/*0.75 ".subtitle."}" : "")
set xlabel "distance from the pair's key to the query (tokens, log scale)"
set ylabel "accuracy"
set logscale x 2
set xrange [1:*]
set yrange [-0.02:1.05]
set grid lc rgb "#dddddd"
set key outside right top box noenhanced
if (exists("ws")) { set arrow from ws, graph 0 to ws, graph 1 nohead dt 3 lc rgb "gray60"; set label "w short" at ws, graph 1.02 center font ",10" }
if (exists("wl")) { set arrow from wl, graph 0 to wl, graph 1 nohead dt 3 lc rgb "gray60"; set label "w long" at wl, graph 1.02 center font ",10" }
set arrow from T, graph 0 to T, graph 1 nohead dt 2 lc rgb "gray30"
set label "T" at T, graph 1.02 center
plot for [i=0:nblocks-2] in index i using 1:2:3 with yerrorlines lw 2 pt 7 ps 0.8 title columnheader(2), \
     in index (nblocks-1) using 1:2 with lines dt 2 lw 2 lc rgb "black" title columnheader(2), \
     chance with lines dt 3 lc rgb "gray50" title "chance 1/16"
