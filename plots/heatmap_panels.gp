# Accuracy by length (x) and depth (y), one panel per model (mean over seeds).
#   gnuplot -e "in='h.tsv'; out='h.png'; panels=3; labels='a b c'; xlabels='128 256'; ylabels='0 0.5 1'" plots/heatmap_panels.gp
# in: per panel, rows "length_index<TAB>depth_index<TAB>accuracy" with a blank line after each
#     length and one more blank line after each panel (gnuplot's index).
if (!exists("in") || !exists("out") || !exists("panels")) { exit error "usage: see the header of plots/heatmap_panels.gp" }
if (!exists("subtitle")) { subtitle = "" }
set terminal pngcairo size (380 * panels + 160),520 font "DejaVu Sans,12" enhanced
set output out
set datafile separator tab
set multiplot layout 1, panels title "Accuracy by length and needle depth".(strlen(subtitle) ? "\n{/*0.8 ".subtitle."}" : "")
set cbrange [0:1]
set palette defined (0 "#f7fbff", 0.5 "#6baed6", 1 "#08306b")
nx = words(xlabels)
ny = words(ylabels)
set xrange [-0.5:nx - 0.5]
set yrange [-0.5:ny - 0.5]
set xtics rotate by 45 right font ",10"
set for [k=1:nx] xtics add (word(xlabels, k) k - 1)
set for [k=1:ny] ytics add (word(ylabels, k) k - 1)
set xlabel "length"
set ylabel "depth (0 = first)"
do for [p=0:panels - 1] {
    set title word(labels, p + 1) noenhanced
    if (p < panels - 1) { unset colorbox } else { set colorbox }
    plot in index p using 1:2:3 with image notitle
}
unset multiplot
