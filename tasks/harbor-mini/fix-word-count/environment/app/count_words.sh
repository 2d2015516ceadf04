#!/bin/sh
# Print how many words the file "$1" holds.
wc -l < "$1"
