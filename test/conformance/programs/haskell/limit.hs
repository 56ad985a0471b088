main :: IO ()
main = loop 0 where loop :: Int -> IO (); loop n = n `seq` loop (n + 1)
