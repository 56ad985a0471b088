main :: IO ()
main = getContents >>= putStr
