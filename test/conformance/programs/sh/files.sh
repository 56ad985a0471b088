tr "[:lower:]" "[:upper:]" <input.txt >output.txt
