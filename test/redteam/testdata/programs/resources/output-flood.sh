# yes(1) floods stdout; the run must be cut at the output cap.
yes "flood flood flood"
