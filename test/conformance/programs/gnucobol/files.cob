       IDENTIFICATION DIVISION.
       PROGRAM-ID. FILES.
       ENVIRONMENT DIVISION.
       INPUT-OUTPUT SECTION.
       FILE-CONTROL.
           SELECT IN-FILE ASSIGN TO "input.txt"
               ORGANIZATION IS LINE SEQUENTIAL.
           SELECT OUT-FILE ASSIGN TO "output.txt"
               ORGANIZATION IS LINE SEQUENTIAL.
       DATA DIVISION.
       FILE SECTION.
       FD IN-FILE.
       01 IN-REC  PIC X(1000).
       FD OUT-FILE.
       01 OUT-REC PIC X(1000).
       WORKING-STORAGE SECTION.
       01 WS-EOF  PIC X VALUE "N".
       PROCEDURE DIVISION.
           OPEN INPUT IN-FILE
           OPEN OUTPUT OUT-FILE
           PERFORM UNTIL WS-EOF = "Y"
               READ IN-FILE
                   AT END MOVE "Y" TO WS-EOF
                   NOT AT END
                       MOVE FUNCTION UPPER-CASE(IN-REC) TO OUT-REC
                       WRITE OUT-REC
               END-READ
           END-PERFORM
           CLOSE IN-FILE
           CLOSE OUT-FILE
           STOP RUN.
