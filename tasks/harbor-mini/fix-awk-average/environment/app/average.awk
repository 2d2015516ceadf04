NR > 1 { s += $2 }
END { print s / NR }
