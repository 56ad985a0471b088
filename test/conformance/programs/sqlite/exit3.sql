.exit 3
