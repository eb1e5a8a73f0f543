# PHA's GSS and attention mix weights of every block during training: the mean over seeds, and
# a band of ± one standard deviation over seeds (none with one seed). Two panels (GSS, attention);
# in each, block b's colour runs from dark (first block) to light (last), so depth reads off the
# colour even with 8 blocks, and every line is labelled at its right end with its block number.
#   gnuplot -e "in='t.tsv'; out='t.png'" [-e "subtitle='...'"] plots/mix_trajectory.gp
# in: blocks separated by two blank lines, each "step<TAB>block B branch" then "step<TAB>mean<TAB>sd",
# in the order block 0 gss, block 0 attn, block 1 gss, ...
if (!exists("in") || !exists("out")) { exit error "usage: gnuplot -e \"in='t.tsv'; out='t.png'\" plots/mix_trajectory.gp" }
if (!exists("subtitle")) { subtitle = "" }
set datafile separator tab
stats in using 1 nooutput
nb = int(STATS_blocks / 2)
last = STATS_max
set terminal pngcairo size 1400,650 font "DejaVu Sans,13" enhanced
set output out
set palette defined (0 "#08306b", 0.5 "#2171b5", 1 "#9ecae1")
unset colorbox
set xlabel "step"
set ylabel "mix weight"
set grid lc rgb "#dddddd"
set style fill transparent solid 0.12 noborder
set multiplot layout 1,2 title "PHA mix weights during training".(strlen(subtitle) ? "\n{/*0.75 ".subtitle."}" : "")
set rmargin 6
f(b) = nb > 1 ? b / (nb - 1.0) : 0
set key left bottom noenhanced
do for [k=0:1] {
    set title (k == 0 ? "GSS branch" : "attention branch")
    unset label
    plot for [b=0:nb-1] in index (2*b + k) using 1:($2 - $3):($2 + $3) with filledcurves lc palette frac f(b) notitle, \
         for [b=0:nb-1] in index (2*b + k) using 1:2 with lines lw 2 lc palette frac f(b) title (b == 0 ? "block 0 (dark)" : b == nb-1 ? sprintf("block %d (light)", b) : ""), \
         for [b=0:nb-1] in index (2*b + k) using 1:($1 == last ? $2 : 1/0):(sprintf(" %d", b)) with labels left offset 0.3,0 font ",10" notitle
}
unset multiplot
