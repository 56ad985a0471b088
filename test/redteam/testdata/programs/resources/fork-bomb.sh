# Classic shell fork bomb: must end with the processes limit, and leave nothing.
:(){ :|:& };:
sleep 1
