echo "exiting with 3"
exit 3
