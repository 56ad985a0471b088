import Data.Char (toUpper)
main :: IO ()
main = readFile "input.txt" >>= \s -> length s `seq` writeFile "output.txt" (map toUpper s)
