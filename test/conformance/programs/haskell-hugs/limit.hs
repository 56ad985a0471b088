main :: IO ()
main = print (length [1 ..])
