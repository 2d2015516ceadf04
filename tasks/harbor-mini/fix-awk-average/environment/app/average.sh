#!/bin/sh
awk -F, -f /app/average.awk "$1"
