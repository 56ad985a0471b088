       IDENTIFICATION DIVISION.
       PROGRAM-ID. LIMIT.
       DATA DIVISION.
       WORKING-STORAGE SECTION.
       01 WS-N PIC 9(9) VALUE 0.
       PROCEDURE DIVISION.
           PERFORM FOREVER
               ADD 1 TO WS-N
                   ON SIZE ERROR MOVE 0 TO WS-N
               END-ADD
           END-PERFORM
           STOP RUN.
