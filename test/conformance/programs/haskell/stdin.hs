import qualified Data.ByteString as B
main :: IO ()
main = B.getContents >>= B.putStr
