-- Hugs prints its own "Program error: ..." on stdout: the error is reported
-- on stderr by the program.
import System.IO
import System.Exit

main :: IO ()
main = do
  hPutStrLn stderr "error: something went wrong"
  exitWith (ExitFailure 1)
