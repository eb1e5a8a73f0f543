# PHA's GSS and attention mix weights of every block during training: the mean over seeds, and
# a band of ± one standard deviation over seeds (none with one seed).
#   gnuplot -e "in='t.tsv'; out='t.png'" [-e "subtitle='...'"] plots/mix_trajectory.gp
# in: blocks separated by two blank lines, each "step<TAB>block B branch" then "step<TAB>mean<TAB>sd".
if (!exists("in") || !exists("out")) { exit error "usage: gnuplot -e \"in='t.tsv'; out='t.png'\" plots/mix_trajectory.gp" }
if (!exists("subtitle")) { subtitle = "" }
set terminal pngcairo size 1000,650 font "DejaVu Sans,13" enhanced
set output out
set datafile separator tab
set title "PHA mix weights during training".(strlen(subtitle) ? "\n{/*0.75 ".subtitle."}" : "")
set xlabel "step"
set ylabel "mix weight"
set grid lc rgb "#dddddd"
set key outside right top box noenhanced
set style fill transparent solid 0.15 noborder
plot for [i=0:*] in index i using 1:($2 - $3):($2 + $3) with filledcurves lc i + 1 notitle, \
     for [i=0:*] in index i using 1:2 with lines lw 2 lc i + 1 title columnheader(2)
