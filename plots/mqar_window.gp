# Multi-query recall beyond the training length as a function of the training window (SWAX with
# one fixed window per run): mean over seeds ± one standard deviation; the elimination floor
# dashed and the SWA-only / mLSTM-only controls as horizontal lines where given.
#   gnuplot -e "in='w.tsv'; out='w.png'; floor=0.08" [-e "subtitle='...'; swa=0.1; mlstm=0.3"] plots/mqar_window.gp
# in: one block, header "window<TAB>label<TAB>sd", rows "window<TAB>mean<TAB>sd".
if (!exists("in") || !exists("out") || !exists("floor")) { exit error "usage: gnuplot -e \"in='w.tsv'; out='w.png'; floor=0.08\" plots/mqar_window.gp" }
if (!exists("subtitle")) { subtitle = "" }
set terminal pngcairo size 1000,650 font "DejaVu Sans,13" enhanced
set output out
set datafile separator tab
set title "Recall beyond the training length vs the SWA training window".(strlen(subtitle) ? "\n{/*0.75 ".subtitle."}" : "")
set xlabel "SWA window during training (tokens, log scale)"
set ylabel "accuracy, keys farther than T from the query"
set logscale x 2
set yrange [-0.02:1.05]
set grid lc rgb "#dddddd"
set key outside right top box noenhanced
plot in using 1:2:3 with yerrorlines lw 2 pt 7 ps 1 title columnheader(2), \
     floor with lines dt 2 lw 2 lc rgb "black" title "elimination floor", \
     (exists("swa") ? swa : 1/0) with lines dt 4 lc rgb "#d95f02" title "SWA-only (window T/8)", \
     (exists("mlstm") ? mlstm : 1/0) with lines dt 5 lc rgb "#1b9e77" title "mLSTM-only"
