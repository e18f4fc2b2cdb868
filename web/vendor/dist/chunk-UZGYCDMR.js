import{a,b,c,d}from"./chunk-GOQ5QSAZ.js";import"./chunk-VVYNOTFS.js";import"./chunk-IQDWREUT.js";export{d as css,b as cssCompletionSource,c as cssLanguage,a as defineCSSCompletionSource};
