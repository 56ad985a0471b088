(spit "output.txt" (.toUpperCase (slurp "input.txt" :encoding "UTF-8")) :encoding "UTF-8")
