#!/bin/sh
set -e
cat > /app/join.sh <<'EOF'
#!/bin/sh
out=
for a in "$@"; do
  if [ -z "$out" ]; then out=$a; else out="$out,$a"; fi
done
printf '%s\n' "$out"
EOF
