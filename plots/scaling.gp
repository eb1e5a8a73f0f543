# Scaling: test perplexity against non-embedding parameters, log-log, one line per family
# (mean over seeds, bars ± one standard deviation); the fitted slopes are in the key.
#   gnuplot -e "in='scaling.tsv'; out='scaling.png'; n=3" [-e "subtitle='...'"] plots/scaling.gp
# in: n blocks separated by two blank lines, each a header "params<TAB>FAMILY (slope ...)"
# then rows "params<TAB>mean ppl<TAB>sd".
if (!exists("in") || !exists("out") || !exists("n")) { exit error "usage: gnuplot -e \"in='scaling.tsv'; out='scaling.png'; n=3\" plots/scaling.gp" }
if (!exists("subtitle")) { subtitle = "" }
set terminal pngcairo size 1000,650 font "DejaVu Sans,13" enhanced
set output out
set datafile separator tab
set title "Test perplexity vs size (same tokens per parameter)".(strlen(subtitle) ? "\n{/*0.75 ".subtitle."}" : "")
set xlabel "non-embedding parameters (log scale)"
set ylabel "test perplexity (log scale)"
set logscale xy
set grid lc rgb "#dddddd"
set key top right noenhanced
plot for [i=0:n-1] in index i using 1:2:3 with yerrorlines lw 2 pt 7 title columnheader(2)
