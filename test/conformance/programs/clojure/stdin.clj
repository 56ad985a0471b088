(let [buf (byte-array 4096)]
  (loop []
    (let [n (.read System/in buf)]
      (when (>= n 0)
        (.write System/out buf 0 n)
        (recur)))))
(.flush System/out)
