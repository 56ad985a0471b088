main :: IO ()
main = putStrLn "héllo wörld ✓ 日本"
