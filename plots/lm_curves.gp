# Validation perplexity vs training tokens, one line per model: the mean over seeds
# with ± one standard deviation as error bars (log y).
#   gnuplot -e "in='curves.tsv'; out='lm_curves.png'" [-e "subtitle='...'"] plots/lm_curves.gp
# in: tab-separated blocks, one per model, separated by two blank lines; each block
#     starts with a header line "tokens<TAB><model><TAB>sd", then rows "tokens<TAB>mean<TAB>sd".
if (!exists("in") || !exists("out")) { exit error "usage: gnuplot -e \"in='curves.tsv'; out='lm_curves.png'\" plots/lm_curves.gp" }
if (!exists("subtitle")) { subtitle = "" }
set terminal pngcairo size 1000,650 font "DejaVu Sans,13" enhanced
set output out
set datafile separator tab
set title "Validation perplexity while training".(strlen(subtitle) ? "\n{/*0.75 ".subtitle."}" : "")
set xlabel "tokens seen (training tokens)"
set ylabel "validation perplexity (log scale)"
set logscale y
set format x "%.1s%c"
set format y "%g"
set grid xtics ytics mytics lc rgb "#dddddd"
set key outside right top box noenhanced
plot for [i=0:*] in index i using 1:2:3 with yerrorlines lw 2 pt 7 ps 0.8 title columnheader(2)
