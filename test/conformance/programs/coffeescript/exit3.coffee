process.exit 3
