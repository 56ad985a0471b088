# A record separator that never occurs: the whole input is one record,
# newlines included, printed as it is.
BEGIN { RS = "\001" }
{ printf "%s", $0 }
