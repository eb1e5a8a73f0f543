# Retrieval accuracy vs context length, one line per model: mean over seeds with ± one
# standard deviation (log2 x); a vertical line at the training length T, a dotted line at chance.
# Curves past the eighth are dashed (gnuplot cycles eight colours).
#   gnuplot -e "in='r.tsv'; out='r.png'; T=128; chance=0.0625" [-e "subtitle='...'"] plots/recall_length.gp
# in: blocks separated by two blank lines: header "length<TAB>model<TAB>sd", rows "length<TAB>mean<TAB>sd".
if (!exists("in") || !exists("out") || !exists("T")) { exit error "usage: gnuplot -e \"in='r.tsv'; out='r.png'; T=128\" plots/recall_length.gp" }
if (!exists("subtitle")) { subtitle = "" }
if (!exists("chance")) { chance = 0 }
set terminal pngcairo size 1000,650 font "DejaVu Sans,13" enhanced
set output out
set datafile separator tab
set title "Retrieval accuracy vs context length".(strlen(subtitle) ? "\n{/*0.75 ".subtitle."}" : "")
set xlabel "context length (tokens, log scale)"
set ylabel "accuracy"
set logscale x 2
set yrange [-0.02:1.05]
set grid lc rgb "#dddddd"
set key outside right top box noenhanced
set arrow from T, graph 0 to T, graph 1 nohead dt 2 lc rgb "gray40"
set label "T" at T, graph 1.02 center
plot for [i=0:*] in index i using 1:2:3 with yerrorlines lw 2 pt 7 ps 0.9 dt 1+(i>=8) title columnheader(2), \
     (chance > 0 ? chance : 1/0) with lines dt 3 lc rgb "gray50" title "chance"
