(loop [n 0] (when (= n -1) (println n)) (recur (inc n)))
