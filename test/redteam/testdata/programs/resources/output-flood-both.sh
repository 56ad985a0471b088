# stdout and stderr flooded at once.
yes out &
yes err >&2
