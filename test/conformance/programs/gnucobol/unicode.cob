       IDENTIFICATION DIVISION.
       PROGRAM-ID. UNI.
       PROCEDURE DIVISION.
           DISPLAY "héllo wörld ✓ 日本".
           STOP RUN.
