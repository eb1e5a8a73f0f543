# Multi-query recall while training: validation accuracy of the answers at T vs step, one line per
# model (mean over seeds ± one standard deviation), the validation set's elimination floor dashed.
#   gnuplot -e "in='c.tsv'; out='c.png'; floor=0.34" [-e "subtitle='...'"] plots/mqar_curves.gp
# in: blocks separated by two blank lines: header "step<TAB>model<TAB>sd", rows "step<TAB>mean<TAB>sd".
if (!exists("in") || !exists("out") || !exists("floor")) { exit error "usage: gnuplot -e \"in='c.tsv'; out='c.png'; floor=0.34\" plots/mqar_curves.gp" }
if (!exists("subtitle")) { subtitle = "" }
set terminal pngcairo size 1000,650 font "DejaVu Sans,13" enhanced
set output out
set datafile separator tab
set title "Multi-query recall while training (validation at T)".(strlen(subtitle) ? "\n{/*0.75 ".subtitle."}" : "")
set xlabel "step"
set ylabel "validation accuracy of the answers"
set yrange [-0.02:1.05]
set grid lc rgb "#dddddd"
set key outside right top box noenhanced
plot for [i=0:*] in index i using 1:2:3 with yerrorlines lw 2 pt 7 ps 0.6 title columnheader(2), \
     floor with lines dt 2 lw 2 lc rgb "black" title "elimination floor"
