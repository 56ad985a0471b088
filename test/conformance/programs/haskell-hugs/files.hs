import Data.Char (toUpper)

main :: IO ()
main = do
  s <- readFile "input.txt"
  writeFile "output.txt" (map toUpper s)
