while :; do :; done
