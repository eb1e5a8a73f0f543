# Needle-in-a-haystack accuracy vs context length, one line per SWAX window regime;
# a vertical line at the training length T.
#   gnuplot -e "in='niah.tsv'; out='niah.png'; T=256" [-e "subtitle='...'"] plots/niah.gp
# in: tab-separated blocks (two blank lines between), one per regime; each starts with a
#     header "length<TAB><regime>", then rows "length<TAB>accuracy" (tokens; mean
#     string_match_all score over depths, samples and haystacks, in [0, 1]).
if (!exists("in") || !exists("out") || !exists("T")) { exit error "usage: gnuplot -e \"in='niah.tsv'; out='niah.png'; T=256\" plots/niah.gp" }
if (!exists("subtitle")) { subtitle = "" }
set terminal pngcairo size 1000,650 font "DejaVu Sans,13" enhanced
set output out
set datafile separator tab
set title "Needle-in-a-haystack (single needle) by SWA window regime".(strlen(subtitle) ? "\n{/*0.75 ".subtitle."}" : "")
set xlabel "context length (tokens, log scale)"
set ylabel "accuracy (fraction of needles retrieved)"
set logscale x 2
set format x "%g"
set yrange [-0.02:1.02]
set grid xtics ytics lc rgb "#dddddd"
set key outside right top box noenhanced
set arrow 1 from T, graph 0 to T, graph 1 nohead dt 2 lw 1.5 lc rgb "gray30"
set label 1 sprintf("T = %g (training length)", T) at T, graph 0.5 offset 0.6,0 textcolor rgb "gray30"
plot for [i=0:*] in index i using 1:2 with linespoints lw 2 pt 7 ps 1 title columnheader(2)
