#!/bin/sh
set -e
printf '{\n  "name": "megaflow",\n  "workers": 4,\n  "debug": false\n}\n' > /app/settings.json
