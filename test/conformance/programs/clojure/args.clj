(doseq [a *command-line-args*] (print (str a "\n")))
(flush)
