       IDENTIFICATION DIVISION.
       PROGRAM-ID. CERR.
       PROCEDURE DIVISION.
           MOVE "x" TO NO-SUCH-VARIABLE
           DISPLAY "unreachable"
           STOP RUN.
